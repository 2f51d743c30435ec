SELF -
REQ agent!b control.wait()