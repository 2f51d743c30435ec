SELF control.wait(ticks=20,a=1.0,b=true,c=false,d=null,e=-0,f=1e3,g=01,h=-2.5E-3,i=+1,j=12345678901234567890123)
REQ agent_b craft.item(q="4",item="oak_planks",x="true",y="",z="1.0")