SELF -
REQ agent_b  
