SELF control.wait
REQ -