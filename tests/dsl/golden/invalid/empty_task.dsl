SELF > control.wait()
REQ -