// Parameters of a statement built from parts (issue #32: the key limits, the ledger's
// reservation and a task's insert joined into one statement): each part binds its values as it
// writes its SQL and gets the `$n::type` to write, so no part counts the others' parameters.

/** Binds `value` as the statement's next parameter and answers its `$n::type`. */
export type Bind = (value: unknown, type: string) => string;

/** A fresh parameter list and the `bind` that fills it; `after`: parameters the statement has before these. */
export function sqlParams(after = 0): { bind: Bind; params: unknown[] } {
  const params: unknown[] = [];
  return {
    params,
    bind: (value, type) => {
      params.push(value);
      return `$${after + params.length}::${type}`;
    },
  };
}
