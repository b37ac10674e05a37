import { ShapeError, type Context } from '@rusty/backend';
import { retain, type Tensor } from '@rusty/autograd';

/** Report of `loadStateDict`: names the model has that the dict lacks, and the reverse. */
export interface LoadReport {
  missing: string[];
  unexpected: string[];
}

/**
 * A module in the PyTorch sense: named parameters (HF names, e.g. `model.layers.0.self_attn.q_proj.weight`),
 * child modules, and a train/eval mode.
 */
export class Module {
  training = true;
  protected params = new Map<string, Tensor>();
  protected children = new Map<string, Module>();

  constructor(readonly ctx: Context) {}

  /** Register (or replace) a parameter under `name`. */
  registerParameter(name: string, t: Tensor): Tensor {
    t.keep();
    t.name = name;
    this.params.set(name, t);
    return t;
  }

  registerModule<M extends Module>(name: string, m: M): M {
    this.children.set(name, m);
    return m;
  }

  /** Direct children with their names. */
  namedChildren(): IterableIterator<[string, Module]> {
    return this.children.entries();
  }

  /** A direct child module by name. */
  child(name: string): Module | undefined {
    return this.children.get(name);
  }

  /** All parameters with their dotted names, depth first in registration order. */
  *namedParameters(prefix = ''): Generator<[string, Tensor]> {
    for (const [n, p] of this.params) yield [prefix + n, p];
    for (const [n, m] of this.children) yield* m.namedParameters(`${prefix}${n}.`);
  }

  /** All modules with their dotted names (this one as ''). */
  *namedModules(prefix = ''): Generator<[string, Module]> {
    yield [prefix.replace(/\.$/, ''), this];
    for (const [n, m] of this.children) yield* m.namedModules(`${prefix}${n}.`);
  }

  parameters(): Tensor[] {
    return [...this.namedParameters()].map(([, p]) => p);
  }

  /** Parameters that require grad (what an optimizer trains). */
  trainableParameters(): [string, Tensor][] {
    return [...this.namedParameters()].filter(([, p]) => p.requiresGrad);
  }

  train(on = true): this {
    for (const [, m] of this.namedModules()) m.training = on;
    return this;
  }

  eval(): this {
    return this.train(false);
  }

  zeroGrad(): void {
    for (const p of this.parameters()) p.zeroGrad();
  }

  /** Parameters by name (the tensors themselves, not copies). */
  stateDict(): Map<string, Tensor> {
    return new Map(this.namedParameters());
  }

  /**
   * Copy tensors into the parameters with the same names (storage replaced, dtype of the given tensor kept).
   * Shapes must match. With `strict` (default) missing or unexpected names throw; the report lists them.
   */
  loadStateDict(dict: Map<string, Tensor> | Record<string, Tensor>, { strict = true } = {}): LoadReport {
    const entries = dict instanceof Map ? dict : new Map(Object.entries(dict));
    const own = new Map(this.namedParameters());
    const missing = [...own.keys()].filter((k) => !entries.has(k));
    const unexpected = [...entries.keys()].filter((k) => !own.has(k));
    if (strict && (missing.length || unexpected.length))
      throw new ShapeError(
        `loadStateDict: ${missing.length ? `missing ${missing.slice(0, 5).join(', ')}${missing.length > 5 ? ', ...' : ''}` : ''}` +
          `${missing.length && unexpected.length ? '; ' : ''}${unexpected.length ? `unexpected ${unexpected.slice(0, 5).join(', ')}` : ''}`,
      );
    for (const [k, t] of entries) {
      const p = own.get(k);
      if (!p) continue;
      if (p.shape.length !== t.shape.length || p.shape.some((d, i) => d !== t.shape[i]))
        throw new ShapeError(`loadStateDict: '${k}' has shape [${t.shape.join(', ')}], the model expects [${p.shape.join(', ')}]`);
    }
    for (const [k, t] of entries) {
      const p = own.get(k);
      if (!p) continue;
      // the parameter takes a reference of its own (a temporary detached tensor would drop it when collected)
      retain(t.data.buffer);
      p.assign(t.data);
    }
    return { missing, unexpected };
  }

  /** Release every parameter. */
  /** Release what a module holds on the GPU beside its parameters (nothing here; a quantized layer's scales).
   *  `dispose` calls it on every module of the tree; idempotent. */
  releaseState(): void {}

  dispose(): void {
    for (const p of this.parameters()) {
      p.zeroGrad();
      p.dispose();
    }
    for (const [, m] of this.namedModules()) m.releaseState();
  }
}
