SELF control.wait() extra
REQ -