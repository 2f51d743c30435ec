SELF resource.obtain(q=4 ,item=oak_planks)
REQ -