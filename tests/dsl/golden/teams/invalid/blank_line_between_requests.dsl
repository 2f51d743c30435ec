SELF -
REQ agent_b control.wait()

REQ agent_c control.wait()