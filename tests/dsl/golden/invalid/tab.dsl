SELF	control.wait()
REQ -