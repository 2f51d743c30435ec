SELF craft.items(q=1,item=crafting_table)
REQ -