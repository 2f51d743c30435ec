SELF -
REQ craft.item(q=1,item=crafting_table)