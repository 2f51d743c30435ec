SELF resource.obtain(q=2,item=minecraft:oak_log,loc=zone/a+b-c.d)
REQ team.b:2 control.wait(ticks=1)