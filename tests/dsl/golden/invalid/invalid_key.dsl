SELF resource.obtain(1q=4)
REQ -