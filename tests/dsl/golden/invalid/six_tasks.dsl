SELF control.wait() > control.wait() > control.wait() > control.wait() > control.wait() > control.wait()
REQ -