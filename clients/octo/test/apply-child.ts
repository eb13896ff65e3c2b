// An `octo apply` of its own process, for the test that kills one mid-way: it takes the
// lock ID on its command line, copies a module's Terraform state into the state folder a few
// times a second (as Terraform writes it), with its journal growing beside it, and uploads
// every second; it prints each upload the server answered, so the test knows the last copy.
// Arguments: base token app dir lockId lineage firstSerial.

import { AppStateClient, OctoStateProvider } from '../src/index.js';
import { journal, tfstate } from './harness.js';

const [base, token, app, dir, lockId, lineage, first] = process.argv.slice(2);
const client = new AppStateClient({ baseUrl: base, token, app });
const provider = new OctoStateProvider({ client, dir, lockId, checkInIntervalInSeconds: 1 });
const id = `${Date.now()}-0badc0de`;
let serial = Number(first);
const entries: string[] = ['CommandStartedEvent'];

await provider.startUploads({
  onUpload: (sent) => {
    for (const f of sent) process.stdout.write(`uploaded ${f.name} ${f.serial ?? f.size}\n`);
  },
});
setInterval(async () => {
  await provider.saveState('checkout.tfstate', tfstate(serial, lineage, ['receipts']));
  entries.push('TerraformProcessOutputEvent');
  await provider.saveState(`journal.${id}.apply.json`, journal('apply', entries));
  serial += 1;
}, 250);
