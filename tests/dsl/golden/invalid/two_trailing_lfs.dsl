SELF -
REQ -

