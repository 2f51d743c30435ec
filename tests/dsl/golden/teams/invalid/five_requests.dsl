SELF -
REQ a control.wait()
REQ b control.wait()
REQ c control.wait()
REQ d control.wait()
REQ e control.wait()