/* ana_html_page.c: the frame every page of the HTML report shares: the head with the style and
 * the inlined charting library (dygraphs, MIT, from Debian's libjs-dygraphs), and the page's
 * script at the end. ana_html.c (a report) and ana_html_diff.c (a comparison) write what goes
 * between. */
#include <stdio.h>

#include "analyze/ana_report_internal.h"

extern const unsigned char ana_dygraph_js[];
extern const unsigned long ana_dygraph_js_len;

static const char css[] =
    "body{font-family:system-ui,sans-serif;margin:1.2em 2em;color:#222;max-width:1400px}"
    "h1{font-size:1.4em;margin:.2em 0}h2{border-bottom:2px solid #ddd;margin-top:1.6em;font-size:1.25em}"
    "h3{font-size:1.05em;margin:1.2em 0 .4em}h4{margin:.3em 0;font-size:.95em;word-break:break-all}"
    "table{border-collapse:collapse;margin:.3em 0 1.2em;font-size:13px}"
    ".scroll,.svgbox{max-width:100%;overflow-x:auto}"
    "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right;vertical-align:top}"
    "td.t,th{text-align:left}th{background:#f0f0f0}td.t{max-width:60em;overflow-wrap:anywhere}"
    ".chart{width:100%;height:380px;margin:.5em 0}"
    ".note{color:#666;font-size:13px}.legend{font-size:12px;min-height:3em;margin-bottom:1em}"
    ".kv td:first-child{text-align:left;font-weight:bold}"
    ".partial{background:#fff3cd;border:1px solid #e0c060;padding:.5em 1em}"
    ".oomline{background:#fde2e1;border:1px solid #d9534f;padding:.5em 1em}"
    ".cards{display:flex;flex-wrap:wrap;gap:12px;margin:.6em 0}"
    ".card{border:1px solid #ddd;border-radius:6px;padding:8px 14px;min-width:180px;max-width:320px;background:#fafafa}"
    ".card .ct{font-size:12px;color:#555}.card .cv{font-size:26px;font-weight:600;margin:2px 0}"
    ".card .cs{font-size:12px;color:#555;overflow-wrap:anywhere}"
    ".card.best{border-color:#2b6cb0;background:#ebf4ff}.card.save{border-color:#2f855a;background:#f0fff4}"
    ".card.oom,.card.rec.oom{border-color:#c53030;background:#fff5f5}"
    ".paste{margin:.6em 0;font-size:14px}.paste code{background:#1e1e1e;color:#f5f5f5;padding:4px 8px;"
    "border-radius:4px;overflow-wrap:anywhere}"
    "button.copy{margin-left:6px;padding:3px 10px;cursor:pointer}"
    ".trust{font-size:14px;padding:4px 10px;border-left:4px solid #999}.trust-exact{border-color:#2f855a}"
    ".trust-range{border-color:#d69e2e}.trust-unvalidated{border-color:#c53030}"
    ".check{font-size:14px;padding:4px 10px;border-left:4px solid #2f855a}.check-off{border-color:#c53030}"
    "ul.rec{font-size:13px;margin:.3em 0;padding-left:1.2em}ul.rec li{overflow-wrap:anywhere}"
    "ul.rec li.l2{margin-left:1.5em}ul.rec li.l3{margin-left:3em}"
    "svg text{font-size:12px;font-family:system-ui,sans-serif}"
    ".bar.other rect{fill:#a0aec0}.bar.best rect{fill:#2b6cb0}.bar.rec rect{fill:#dd6b20}"
    ".bar.oom rect{fill:#e53e3e}.bar line.range{stroke:#1a202c;stroke-width:2}.bar.best text.v{font-weight:bold}"
    ".lb{stroke:#000;stroke-width:1.5;stroke-dasharray:4 3}"
    ".split rect.live,rect.live,.key.live{fill:#38a169;background:#38a169}"
    ".split rect.round,.key.round{fill:#ecc94b;background:#ecc94b}"
    ".split rect.freein,.key.freein{fill:#ed8936;background:#ed8936}"
    ".split rect.cached,.key.cached{fill:#a0aec0;background:#a0aec0}"
    "rect.free,.key.free{fill:#e2e8f0;background:#e2e8f0;stroke:#a0aec0;stroke-width:.5}"
    ".key{display:inline-block;width:11px;height:11px;margin:0 3px 0 10px;vertical-align:middle}"
    ".side{display:flex;flex-wrap:wrap;gap:24px}.segmap{max-height:820px;overflow:auto}"
    "td.cs summary{cursor:pointer}.stack{font-family:monospace;font-size:12px;margin:4px 0}"
    ".diffup{color:#c53030}.diffdown{color:#2f855a}"
    ".stack .lib{color:#888}.norun{font-size:14px}select{max-width:40em}"
    "table.waste td.t{min-width:16em}table.callsites td.cs{min-width:30em}";

/* The page's script: the stacked timelines (dygraphs; each callsite's own bytes in the legend,
 * a select for the reserved lines) and the copy buttons. Every chart marks itself drawn
 * (data-drawn) once dygraphs has painted it, for the browser test. */
static const char page_js[] =
    "function gmFmt(v){var u=['B','KiB','MiB','GiB','TiB'],i=0;v=Math.max(0,v);"
    "while(v>=1024&&i<4){v/=1024;i++;}return (i?v.toFixed(2):v.toFixed(0))+' '+u[i];}"
    "function gmEsc(s){return String(s).replace(/[&<>\"']/g,function(c){return '&#'+c.charCodeAt(0)+';';});}"
    "document.querySelectorAll('script.chart-data').forEach(function(el){"
    "var d=JSON.parse(el.textContent),id=el.dataset.chart,div=document.getElementById(id);"
    "if(!d.rows.length){div.textContent='No timeline: the trace has no allocations.';div.style.height='auto';"
    "div.setAttribute('data-drawn','empty');return;}"
    "var K=d.nstack,n=d.labels.length-1,R=n-K,series={};"
    "var pal=['#4e79a7','#f28e2b','#59a14f','#b07aa1','#edc948','#76b7b2','#ff9da7','#9c755f','#bab0ac'];"
    "var rc=['#c53030','#2b6cb0','#2f855a','#6b46c1','#975a16','#b83280','#4a5568','#0987a0'];"
    "for(var j=0;j<K;j++)series[d.labels[1+j]]={fillGraph:true,strokeWidth:0.6,color:pal[(K-1-j)%9]};"
    "for(var r=0;r<R;r++)series[d.labels[1+K+r]]={strokeWidth:2,color:rc[r%8]};"
    "var g=new Dygraph(div,d.rows,{labels:d.labels,stepPlot:true,fillAlpha:0.9,axes:{y:{labelsKMG2:true}},"
    "xlabel:d.xlabel||'seconds since the trace started',ylabel:'bytes',legend:'always',"
    "labelsDiv:document.getElementById(id+'-legend'),showRangeSelector:true,series:series,"
    "legendFormatter:function(a){if(a.x==null)return '';var h=gmEsc(a.xHTML)+' s:';"
    "a.series.forEach(function(s,i){if(!s.isVisible||s.y==null)return;var v=s.y;"
    "if(i<K)v=s.y-(i+1<K?a.series[i+1].y:0);"
    "h+=' <span style=\"color:'+s.color+'\">'+gmEsc(s.label)+': '+gmFmt(v)+'</span>';});return h;},"
    "drawCallback:function(gr,initial){if(initial)div.setAttribute('data-drawn','1');}});"
    "var sel=document.getElementById(id+'-select');"
    "function show(v){var vis=[];for(var i=0;i<n;i++){var r=i-K;"
    "vis.push(i<K||(v==='main'?d.show.indexOf(r)>=0:v==='all'?true:r===+v));}g.setVisibility(vis);}"
    "[['main','as run and recommended'],['all','every setting']].forEach(function(o){"
    "var e=document.createElement('option');e.value=o[0];e.textContent=o[1];sel.appendChild(e);});"
    "for(var q=0;q<R;q++){var o=document.createElement('option');o.value=String(q);"
    "o.textContent=d.labels[1+K+q];sel.appendChild(o);}"
    "sel.onchange=function(){show(sel.value);};sel.value=d.show.length?'main':'all';show(sel.value);});"
    "document.querySelectorAll('button.copy').forEach(function(b){b.onclick=function(){"
    "var el=document.getElementById(b.dataset.copy),t=el.textContent;"
    "function done(){b.textContent='Copied';}"
    "function fallback(){var rg=document.createRange();rg.selectNodeContents(el);var s=window.getSelection();"
    "s.removeAllRanges();s.addRange(rg);try{document.execCommand('copy');done();}catch(e){b.textContent='Press Ctrl+C';}}"
    "if(navigator.clipboard&&window.isSecureContext){navigator.clipboard.writeText(t).then(done,fallback);}"
    "else fallback();};});";

void ana_html_page_begin(FILE *out, const char *title) {
  fprintf(out, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
               "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
               "<title>%s</title>\n<style>%s</style>\n"
               "<script>/* dygraphs 2.2.1, MIT licence, from Debian's libjs-dygraphs */\n",
          title, css);
  fwrite(ana_dygraph_js, 1, ana_dygraph_js_len, out);
  fprintf(out, "\n</script>\n</head><body>\n<h1>%s</h1>\n", title);
}

void ana_html_page_end(FILE *out) { fprintf(out, "<script>%s</script>\n</body></html>\n", page_js); }
