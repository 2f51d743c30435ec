SELF -
REQ agent_b control.wait()
REQ agent_b control.wait(ticks=1)