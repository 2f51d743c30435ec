SELF   craft.item(item=oak_planks,bind=STORAGE,count=8,input=oak_log)>resource.deliver(q=8,item=oak_planks,to=agent_c)
REQ  agent_c  resource.deliver(q=8,item=oak_planks,dst=chest_b)
