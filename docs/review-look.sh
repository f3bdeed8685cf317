#!/usr/bin/env bash
# Renders a review document as GitHub would show it, to look at before posting a change to
# components/review/render.ts: GitHub's own Markdown renderer (cmark-gfm, with the extensions
# GitHub enables), a page styled like a comment, and a headless browser's screenshot.
#   bash docs/review-look.sh docs/review-example.md docs/review-example.png
# The first stack's section is shown open. It also checks what a broken document shows
# first: the summary must render as a table with one row per stack, and every stack's
# section as a collapsed <details>.
set -euo pipefail
md=${1:?usage: docs/review-look.sh REVIEW.md OUT.png}
png=${2:?usage: docs/review-look.sh REVIEW.md OUT.png}
for tool in cmark-gfm chromium; do
  command -v "$tool" >/dev/null || { echo "review-look: $tool is missing: apt-get install cmark-gfm chromium" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# --unsafe keeps <details>/<summary>, which GitHub allows; tagfilter drops what GitHub drops.
body=$(cmark-gfm --unsafe -e table -e strikethrough -e autolink -e tagfilter "$md")
rows=$(grep -c '^| `' "$md" || true)
html_rows=$(grep -c '^<td><code>' <<<"$body" || true)
sections=$(grep -c '^<details>' "$md" || true)
html_sections=$(grep -c '<details>' <<<"$body" || true)
if [ "$rows" != "$html_rows" ] || [ "$sections" != "$html_sections" ]; then
  echo "review-look: $md renders badly: $html_rows of $rows summary rows as table rows, $html_sections of $sections sections as <details>" >&2
  exit 1
fi
cat >"$work/page.html" <<HTML
<!doctype html><html><head><meta charset="utf-8"><style>
body { font: 14px/1.5 -apple-system, "Segoe UI", "DejaVu Sans", sans-serif; color: #1f2328; max-width: 920px; margin: 16px auto; padding: 16px 24px; border: 1px solid #d1d9e0; border-radius: 6px; }
table { border-collapse: collapse; display: block; overflow: auto; } th, td { border: 1px solid #d1d9e0; padding: 4px 10px; } tr:nth-child(2n) { background: #f6f8fa; }
code, pre { font: 12px/1.45 "DejaVu Sans Mono", monospace; background: #f6f8fa; border-radius: 6px; } pre { padding: 12px; overflow: auto; }
blockquote { margin: 0; padding: 0 12px; border-left: 4px solid #9a6700; color: #59636e; }
details { margin: 6px 0; } summary { cursor: pointer; }
</style></head><body>${body/<details>/<details open>}</body></html>
HTML
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1000,2400 --screenshot="$work/shot.png" "file://$work/page.html" >/dev/null 2>&1
cp "$work/shot.png" "$png"
echo "review-look: $rows stacks, $sections sections rendered; wrote $png"
