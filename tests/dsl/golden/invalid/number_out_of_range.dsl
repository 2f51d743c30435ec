SELF control.wait(ticks=1e999)
REQ -