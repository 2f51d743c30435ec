SELF resource.obtain(q=8,item=oak_planks) > resource.deliver(q=8,item=oak_planks,to=agent_b)
REQ agent_c resource.deliver(bind=CHEST_TO_A,q=1,item=chest,dst=chest_a)
REQ agent_b craft.item(bind=CHEST_TO_A,q=1,input=oak_planks,item=chest,station=crafting_table) > resource.deliver(q=1,item=chest,to=agent_c)