SELF -
REQ agent_b resource.obtain(q=4