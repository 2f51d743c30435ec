SELFcontrol.wait()
REQ -