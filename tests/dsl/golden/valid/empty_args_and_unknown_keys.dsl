SELF control.wait()
REQ agent_b craft.item(recipe=fast,speed=2,item=crafting_table)