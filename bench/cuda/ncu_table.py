#!/usr/bin/env python3
"""Per-kernel table from an Nsight Compute CSV (`ncu --csv --metrics gpu__time_duration.sum,
dram__bytes_read.sum,launch__grid_size ...`): one line per profiled kernel (time, DRAM bytes read,
achieved read bandwidth, grid), then the kernels summed by name. Usage: ncu_table.py ncu.csv"""
import csv,sys,collections,re
rows=[]
txt=open(sys.argv[1]).read().splitlines()
# find header line starting with "ID"
start=[i for i,l in enumerate(txt) if l.startswith('"ID"')]
if not start: print("no csv"); sys.exit()
r=csv.reader(txt[start[0]:])
hdr=next(r)
ix={h:i for i,h in enumerate(hdr)}
for row in r:
    if len(row)!=len(hdr): continue
    rows.append(row)
# metrics long format: ID, ..., Kernel Name, ..., Metric Name, Metric Unit, Metric Value
k=collections.OrderedDict()
for row in rows:
    id_=row[ix['ID']]; name=row[ix['Kernel Name']]; m=row[ix['Metric Name']]; u=row[ix['Metric Unit']]; v=row[ix['Metric Value']].replace(',','')
    d=k.setdefault(id_,{'name':name})
    d[m]=(float(v) if re.match(r'^[0-9.eE+-]+$',v) else v,u)
tot=0;agg=collections.OrderedDict()
for id_,d in k.items():
    t,u=d.get('gpu__time_duration.sum',(0,''))
    us=t/1000 if u=='nsecond' or u=='ns' else (t if u in('usecond','us') else t*1000 if u in ('msecond','ms') else t)
    b,bu=d.get('dram__bytes_read.sum',(0,''))
    mult={'byte':1,'Kbyte':1e3,'Mbyte':1e6,'Gbyte':1e9,'KB':1e3,'MB':1e6,'GB':1e9}.get(bu,1)
    by=b*mult
    tot+=us
    nm=re.sub(r'\(.*','',d['name'])[:60]
    g=d.get('launch__grid_size',('',''))[0]
    print(f"{id_:>5} {us:9.2f} us {by/1e6:9.3f} MB {by/us/1e6 if us else 0:7.2f} TB/s grid {g} {nm}")
    a=agg.setdefault(nm,[0,0,0]); a[0]+=1;a[1]+=us;a[2]+=by
print("total us",tot)
for nm,(n,us,by) in sorted(agg.items(),key=lambda x:-x[1][1]):
    print(f"{n:4d} {us:9.2f} us {by/1e6:9.2f} MB {by/us/1e6:6.2f} TB/s {nm}")
