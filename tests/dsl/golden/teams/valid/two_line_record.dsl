SELF control.wait()
REQ -