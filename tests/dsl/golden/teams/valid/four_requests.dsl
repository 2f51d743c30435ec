SELF -
REQ agent_e control.wait()
REQ agent_d control.wait(ticks=1)
REQ agent_c control.wait(ticks=2)
REQ agent_b control.wait(ticks=3)