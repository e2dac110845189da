"""networking-strait: neutron's ML2 mechanism driver for Strait (docs/openstack.md)."""
