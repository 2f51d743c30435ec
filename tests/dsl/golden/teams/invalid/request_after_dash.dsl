SELF -
REQ -
REQ agent_b control.wait()