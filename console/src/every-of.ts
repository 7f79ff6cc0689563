// Lists of the contract's names that the console shows (phases, events), checked against the
// contract's unions: a name the server adds or drops is a type error where the list is written,
// so the console's copy cannot drift.

/** `everyOf<Union>()([...])`: the list, if it holds every member of the union and nothing else. */
export const everyOf =
  <T extends string>() =>
  <L extends readonly T[]>(list: L & ([T] extends [L[number]] ? unknown : never)): L =>
    list;
