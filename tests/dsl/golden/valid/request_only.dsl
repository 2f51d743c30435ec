SELF -
REQ agent_b craft.item(q=1,item=crafting_table)