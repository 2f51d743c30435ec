SELF - control.wait()
REQ -