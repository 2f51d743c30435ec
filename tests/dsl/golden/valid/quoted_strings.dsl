SELF resource.deliver(q=1,item="a\"b,c)d > e(",dst="order chest",dst_role="caf\u00e9\n\\")
REQ -