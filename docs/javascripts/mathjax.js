// MathJax for the formulas of the pages (pymdownx.arithmatex in generic mode). The site loads
// MathJax from its own files (javascripts/mathjax/, copied from npm by `make docs`), with SVG
// output: no web fonts, so the formulas render without a network, opened from disk too.
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true
  },
  options: {
    ignoreHtmlClass: ".*|",
    processHtmlClass: "arithmatex"
  },
  svg: {
    fontCache: "global"
  }
};

// MathJax typesets the first page itself once it has loaded; a page the theme swaps in later
// is typeset again here.
document$.subscribe(() => {
  if (!MathJax.typesetPromise) {
    return;
  }
  MathJax.typesetClear();
  MathJax.texReset();
  MathJax.typesetPromise();
});
