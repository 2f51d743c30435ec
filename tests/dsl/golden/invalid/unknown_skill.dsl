SELF fly(q=1)
REQ -