"""Counts the public API of the cairn crate from its rustdoc output.

    cargo doc -p cairn --no-deps && python3 .ci/public_items.py target/doc/cairn

Prints the items listed in all.html (structs, enums, traits, functions, constants, type
aliases) and, over their pages, the inherent methods plus fields and variants.
"""
import re,sys,os
root=sys.argv[1]
s=open(os.path.join(root,'all.html')).read()
items=re.findall(r'<li><a href="([^"]+)">',s)
methods=0
for href in items:
    p=os.path.join(root,href)
    if not os.path.exists(p): continue
    h=open(p).read()
    # inherent impl section only
    start=h.find('id="implementations"')
    if start<0: continue
    end=h.find('id="trait-implementations"')
    end=end if end>0 else len(h)
    methods+=len(set(re.findall(r'id="method\.([a-z_0-9]+)"',h[start:end])))
    fields=len(set(re.findall(r'id="(?:structfield|variant)\.([A-Za-z_0-9]+)"',h)))
    methods+=fields
print(f"items={len(items)} inherent_methods+fields+variants={methods} total={len(items)+methods}")
