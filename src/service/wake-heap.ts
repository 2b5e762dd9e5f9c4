// When watched tokens stop authenticating, earliest first (service/authorizer-watch.ts).

/** A binary heap of [moment, AccessorID]: when watched tokens stop authenticating. */
export class WakeHeap {
  private readonly at: number[] = [];
  private readonly who: string[] = [];

  get size(): number {
    return this.at.length;
  }

  peek(): number | undefined {
    return this.at[0];
  }

  push(at: number, who: string): void {
    let i = this.at.length;
    this.at.push(at);
    this.who.push(who);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if ((this.at[parent] as number) <= at) break;
      this.swap(i, parent);
      i = parent;
    }
  }

  pop(): string | undefined {
    if (this.at.length === 0) return undefined;
    const top = this.who[0];
    const lastAt = this.at.pop() as number;
    const lastWho = this.who.pop() as string;
    if (this.at.length > 0) {
      this.at[0] = lastAt;
      this.who[0] = lastWho;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < this.at.length && (this.at[l] as number) < (this.at[m] as number)) m = l;
        if (r < this.at.length && (this.at[r] as number) < (this.at[m] as number)) m = r;
        if (m === i) break;
        this.swap(i, m);
        i = m;
      }
    }
    return top;
  }

  private swap(a: number, b: number): void {
    [this.at[a], this.at[b]] = [this.at[b] as number, this.at[a] as number];
    [this.who[a], this.who[b]] = [this.who[b] as string, this.who[a] as string];
  }
}
