SELF control.wait() 
REQ -