SELF resource.obtain(q=4,item=)
REQ -