SELF -
REQ - x