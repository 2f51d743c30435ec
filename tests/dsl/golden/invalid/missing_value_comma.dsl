SELF resource.obtain(q=,item=oak_planks)
REQ -