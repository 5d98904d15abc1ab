import re,sys
name=sys.argv[1]
s=open(f'tokio/src/{name}.rs').read()
s=re.sub(r' for the tokio adapter','',s,count=1)
# imports
s=re.sub(r'use crate::hosted::\{Events, Hosted\};\n','',s)
s=re.sub(r'use crate::\{([^}]*)\};', lambda m: 'use zk_recipes::client::Error;\n\n#[allow(unused_imports)]\nuse super::{form, only_async, only_blocking, rt};\nuse super::{Events, Hosted, '+', '.join(x.strip() for x in m.group(1).split(',') if x.strip()!='Error')+'};', s, count=1)
s=s.replace('tokio::sync::Mutex','rt::Mutex')
s=s.replace('std::future::pending::<()>().await','rt::forever().await')
lines=s.split('\n')
out=[]
for l in lines:
    if re.match(r'^(impl\b|impl<|async fn|pub async fn|pub\(crate\) async fn)',l) and not re.match(r'^impl(<[^>]*>)? *\w+ for ',l) and not l.startswith('impl Drop') :
        out.append('#[form]')
    out.append(l)
s='\n'.join(out)
# remove doc examples in //! blocks
s=re.sub(r'//! ```[^\n]*\n(//![^\n]*\n)*?//! ```\n','',s)
open(f'surface/src/{name}.rs','w').write(s)
