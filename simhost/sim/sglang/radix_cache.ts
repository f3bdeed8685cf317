// SGLang's prefix cache (srt/mem_cache/radix_cache.py, RadixCache): a radix tree of the
// token sequences the server has computed. A new request reuses the KV of its longest
// cached prefix (match_prefix) and prefills only the rest; a request's prompt is inserted
// once prefilled (cache_unfinished_req) and prompt + output once it finishes
// (cache_finished_req); when the pool is full the least recently used leaves go first
// (evict, by last_access_time); /flush_cache empties it (reset).
//
// A token here is what `countTokens` counts: a 4-character slice of the text from its
// start, so a prefix match compares text, whole tokens only. Edges are kept as text (a
// multiple of 4 characters, except the last token of a sequence), not token arrays.

const TOKEN_CHARS = 4;

interface Node {
  /** The edge into this node: whole tokens, except a sequence's final partial token. */
  text: string;
  parent: Node | null;
  /** Children by the first token of their edge. */
  children: Map<string, Node>;
  lastAccess: number;
}

function tokensOf(chars: number): number {
  return Math.ceil(chars / TOKEN_CHARS);
}

/** Characters `a` and `b` share from the start, rounded down to whole tokens. */
function commonTokenChars(a: string, b: string, from: number): number {
  const n = Math.min(a.length, b.length - from);
  let i = 0;
  while (i < n && a.charCodeAt(i) === b.charCodeAt(from + i)) i++;
  return i === a.length && from + i === b.length ? i : i - (i % TOKEN_CHARS);
}

export class RadixCache {
  private root: Node = { text: "", parent: null, children: new Map(), lastAccess: 0 };
  private clock = 0;
  /** Tokens held by the tree (shared prefixes once). */
  size = 0;

  constructor(readonly capacityTokens: number) {}

  /** match_prefix: how many leading tokens of `text` are cached; marks them recently used. */
  match(text: string): number {
    const now = ++this.clock;
    let node = this.root;
    let at = 0;
    for (;;) {
      node.lastAccess = now;
      const child = node.children.get(text.slice(at, at + TOKEN_CHARS));
      if (!child) break;
      const common = commonTokenChars(child.text, text, at);
      if (common === 0) break;
      child.lastAccess = now;
      at += common;
      if (common < child.text.length) break;
      node = child;
    }
    return tokensOf(at);
  }

  /** insert: caches the sequence `text` (its prefixes come with it), then evicts down to capacity. */
  insert(text: string): void {
    const now = ++this.clock;
    let node = this.root;
    let at = 0;
    while (at < text.length) {
      node.lastAccess = now;
      const key = text.slice(at, at + TOKEN_CHARS);
      const child = node.children.get(key);
      if (!child) {
        const leaf: Node = { text: text.slice(at), parent: node, children: new Map(), lastAccess: now };
        node.children.set(key, leaf);
        this.size += tokensOf(leaf.text.length);
        break;
      }
      const common = commonTokenChars(child.text, text, at);
      if (common < child.text.length) this.split(child, common);
      at += common;
      node = child;
      node.lastAccess = now;
    }
    this.evict();
  }

  /** reset: empties the cache (/flush_cache). */
  reset(): void {
    this.root = { text: "", parent: null, children: new Map(), lastAccess: 0 };
    this.size = 0;
  }

  /** _split_node: `node` keeps the first `chars` of its edge; a new child takes the rest and the children. */
  private split(node: Node, chars: number): void {
    const rest: Node = { text: node.text.slice(chars), parent: node, children: node.children, lastAccess: node.lastAccess };
    for (const c of rest.children.values()) c.parent = rest;
    node.text = node.text.slice(0, chars);
    node.children = new Map([[rest.text.slice(0, TOKEN_CHARS), rest]]);
    // `chars` is whole tokens (commonTokenChars), so the tree holds as many tokens as before.
  }

  /** evict: least recently used leaves first, until the tree fits its capacity. */
  private evict(): void {
    if (this.size <= this.capacityTokens) return;
    const leaves: Node[] = [];
    const stack = [...this.root.children.values()];
    for (let n = stack.pop(); n; n = stack.pop()) {
      if (n.children.size === 0) leaves.push(n);
      else stack.push(...n.children.values());
    }
    leaves.sort((a, b) => b.lastAccess - a.lastAccess);
    while (this.size > this.capacityTokens && leaves.length > 0) {
      const leaf = leaves.pop()!;
      const parent = leaf.parent!;
      parent.children.delete(leaf.text.slice(0, TOKEN_CHARS));
      this.size -= tokensOf(leaf.text.length);
      if (parent !== this.root && parent.children.size === 0) {
        // The parent is a leaf now: back into the queue at its place by last access.
        let i = leaves.length;
        while (i > 0 && leaves[i - 1].lastAccess < parent.lastAccess) i--;
        leaves.splice(i, 0, parent);
      }
    }
  }
}
