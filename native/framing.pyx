# placeholder, replaced by the native implementation
