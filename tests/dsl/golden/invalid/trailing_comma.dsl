SELF resource.obtain(q=4,)
REQ -