SELF control.wait() >
REQ -