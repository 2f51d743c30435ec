SELF -
REQ agent_b control.wait()
REQ -