SELF  resource.obtain(q=4, item=oak_planks)>resource.deliver(q=4,   item=oak_planks,to=agent_b)
REQ   agent_b    craft.item(q=1,item=crafting_table)   >  control.wait()
