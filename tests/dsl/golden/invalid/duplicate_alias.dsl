SELF resource.obtain(count=4,item=oak_planks,quantity=5)
REQ -